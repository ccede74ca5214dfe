"""Typed decoding of Nodes, Leases and Pods: JSON bytes straight to the records of ``objects.py``.

Why: a production Node is 10-20 KB of JSON, mostly ``status.images`` and ``managedFields``, which
nodewatch never reads. Parsing it into dicts (orjson) and then picking the few fields
(``node_from_dict``) builds every string of those images only to throw them away: 65,000 Nodes took
4.4 s that way. msgspec decodes into Structs that declare only the fields read, and skips the
rest in C without building it (about 8x faster on production-shaped Nodes, see bench/README.md).

The typed path is strict about types; the cluster is not trusted to be. Whatever it cannot decode
(a field of an unexpected type, an ERROR event, a Status instead of a list) makes the caller fall
back to the forgiving dict readers of ``objects.py`` for that page or line (``WireError``), so both
paths give the same records and the same reports.

Both record builders here and the dict readers in ``objects.py`` produce the same ``NodeRecord``
and ``LeaseRecord``; tests/sources/test_decode.py checks that they agree field by field.
"""

from __future__ import annotations

from array import array
from itertools import chain
from operator import attrgetter
from sys import intern
from typing import Any, Optional, Union

import msgspec
from msgspec import Struct, field

from .objects import (
    EMPTY_MAP,
    LABEL_HOSTNAME,
    NO_CONDITIONS,
    NO_LABELS,
    NO_TIME,
    NODE_LEASE_NAMESPACE,
    SHAPES_MAX,
    SHARED_MAPS_MAX,
    Conditions,
    Labels,
    LeaseRecord,
    NodeRecord,
    PodRecord,
    _label_sets,
    _shared_map,
    address_text,
    kubelet_write_time,
    managed_write_time,
    node_labels,
    node_profile,
)
from .rules import Taint, Toleration
from .timeutil import MAX_TIME, parse_time, seconds

# Optional[...] rather than "X | None": msgspec reads these annotations at class creation.
_S = Optional[str]


class WireError(ValueError):
    """The typed decoder cannot read these bytes: use the forgiving dict path."""


class _Meta(Struct, gc=False):
    name: _S = None
    namespace: _S = None
    uid: _S = None
    resourceVersion: _S = None


class _NodeMeta(Struct, gc=False):
    name: _S = None
    labels: msgspec.Raw = msgspec.Raw()  # the JSON text: decoded once per pool (``_labels``)
    resourceVersion: _S = None
    creationTimestamp: _S = None


class _Taint(Struct, gc=False):
    key: _S = None
    effect: _S = None
    value: _S = None
    timeAdded: _S = None


class _NodeSpec(Struct, gc=False):
    taints: Optional[list[_Taint]] = None
    unschedulable: Optional[bool] = None


class _Condition(Struct, gc=False):
    type: _S = None
    status: _S = None
    reason: _S = None
    message: _S = None
    lastHeartbeatTime: _S = None
    lastTransitionTime: _S = None


class _NodeInfo(Struct, gc=False):
    kubeletVersion: _S = None
    containerRuntimeVersion: _S = None
    kernelVersion: _S = None
    osImage: _S = None


class _Address(Struct, gc=False):
    type: _S = None
    address: _S = None


class _KubeletEndpoint(Struct, gc=False):
    Port: Optional[int] = None


class _DaemonEndpoints(Struct, gc=False):
    kubeletEndpoint: Optional[_KubeletEndpoint] = None


class _NodeStatus(Struct, gc=False):
    conditions: Optional[list[_Condition]] = None
    nodeInfo: Optional[_NodeInfo] = None
    addresses: Optional[list[_Address]] = None
    capacity: msgspec.Raw = msgspec.Raw()  # the JSON text: decoded once per distinct map (``_map``)
    allocatable: msgspec.Raw = msgspec.Raw()
    daemonEndpoints: Optional[_DaemonEndpoints] = None


class _Node(Struct, gc=False):
    metadata: Optional[_NodeMeta] = None
    spec: Optional[_NodeSpec] = None
    status: Optional[_NodeStatus] = None


class _LeaseSpec(Struct, gc=False):
    holderIdentity: _S = None
    renewTime: _S = None
    leaseDurationSeconds: Optional[Union[int, float]] = None


class _ManagedField(Struct, gc=False):
    manager: _S = None
    operation: _S = None
    time: _S = None  # fieldsV1, the bulk of an entry, is skipped


class _LeaseMeta(Struct, gc=False):
    """What a Lease's record reads of its metadata: not its uid (a string decoded and dropped on
    every renewal, 13,000 a second at 130k nodes)."""

    name: _S = None
    namespace: _S = None
    resourceVersion: _S = None
    managedFields: Optional[list[_ManagedField]] = None


class _Lease(Struct, gc=False):
    metadata: Optional[_LeaseMeta] = None
    spec: Optional[_LeaseSpec] = None


class _WatchedLeaseMeta(Struct, gc=False):
    """``_LeaseMeta`` with the managed fields kept as their JSON text (``_ManagedText``): decoded
    only if the record's ``written_at`` is read, which a renewal on the watch never is (it is timed
    by its receipt)."""

    name: _S = None
    namespace: _S = None
    resourceVersion: _S = None
    managedFields: msgspec.Raw = msgspec.Raw()


class _WatchedLease(Struct, gc=False):
    metadata: Optional[_WatchedLeaseMeta] = None
    spec: Optional[_LeaseSpec] = None


class _Owner(Struct, gc=False):
    kind: _S = None
    name: _S = None
    controller: Optional[bool] = None


class _PodMeta(_Meta, gc=False):
    ownerReferences: Optional[list[_Owner]] = None
    deletionTimestamp: _S = None


class _Toleration(Struct, gc=False):
    key: _S = None
    operator: _S = None
    value: _S = None
    effect: _S = None
    tolerationSeconds: Optional[Union[int, float]] = None


class _PodSpec(Struct, gc=False):
    nodeName: _S = None
    tolerations: Optional[list[_Toleration]] = None


class _PodCondition(Struct, gc=False):
    type: _S = None
    status: _S = None


class _PodStatus(Struct, gc=False):
    phase: _S = None
    conditions: Optional[list[_PodCondition]] = None


class _Pod(Struct, gc=False):
    metadata: Optional[_PodMeta] = None
    spec: Optional[_PodSpec] = None
    status: Optional[_PodStatus] = None


class _ListMeta(Struct, gc=False):
    resourceVersion: _S = None
    continue_: _S = field(default=None, name="continue")


class _NodeList(Struct, gc=False):
    metadata: Optional[_ListMeta] = None
    items: Optional[list[_Node]] = None


class _LeaseList(Struct, gc=False):
    metadata: Optional[_ListMeta] = None
    items: Optional[list[_Lease]] = None


class _PodList(Struct, gc=False):
    metadata: Optional[_ListMeta] = None
    items: Optional[list[_Pod]] = None


class _PodEvent(Struct, gc=False):
    type: str = ""
    object: Optional[_Pod] = None


class _NodeEvent(Struct, gc=False):
    type: str = ""
    object: Optional[_Node] = None


class _LeaseEvent(Struct, gc=False):
    type: str = ""
    object: Optional[_Lease] = None


class _WatchedLeaseEvent(Struct, gc=False):
    type: str = ""
    object: Optional[_WatchedLease] = None


# --- times ----------------------------------------------------------------------------------------

_time_cache: dict[str, float] = {}
"""Times parsed, NaN for what is not one."""
_TIME_CACHE_MAX = 4096
"""Small on purpose: the repeats are near each other (a node's conditions share its heartbeat, the
nodes of a page their status-update seconds). Decoding 65,000 sim Nodes parsed 131,000 times with
100,000 entries (~10 MB of keys and table, mostly times seen once) and 142,000 with 4,096 (~0.5 MB):
about 10 ms more."""


def _time_or_nan(value: str | None) -> float:
    """``parse_time`` with a memo, NaN for unknown (as ``Conditions`` holds times): heartbeat and
    transition times repeat across a fleet's nodes (a status update every few seconds to minutes),
    and parsing each was a third of the decode. Not for a Lease's renewTime: microseconds, never
    the same twice."""
    if value is None:
        return NO_TIME
    t = _time_cache.get(value)
    if t is None:
        if len(_time_cache) >= _TIME_CACHE_MAX:
            _time_cache.clear()
        parsed = parse_time(value)
        t = _time_cache[value] = NO_TIME if parsed is None else parsed
    return t


def _time(value: str | None) -> float | None:
    """``_time_or_nan`` with None for unknown."""
    t = _time_or_nan(value)
    return None if t != t else t


def _i(value: str | None) -> str:
    if not value:
        return ""
    return intern(value) if len(value) <= 256 else value


# --- records ----------------------------------------------------------------------------------------


def _node_record(n: _Node) -> NodeRecord | None:
    """The record of a typed Node; None without a name (the dict path skips those too)."""
    meta = n.metadata
    if meta is None or not meta.name:
        return None
    spec = n.spec
    status = n.status
    # one copy of the name for the record, the hostname label, the Hostname/InternalDNS addresses
    # that repeat it, and the Lease's name and holder (interned)
    name = intern(meta.name)
    labels = _labels(meta.labels, name)
    taints: tuple[Taint, ...] = ()
    unschedulable = False
    if spec is not None:
        unschedulable = spec.unschedulable is True
        if spec.taints:
            taints = tuple(Taint(key=t.key, effect=t.effect or "", value=t.value or "", time_added=_time(t.timeAdded))
                           for t in spec.taints if t.key)
    conditions = NO_CONDITIONS
    kubelet = runtime = kernel = os_image = ""
    addresses: tuple[str, ...] = ()
    capacity = allocatable = EMPTY_MAP
    port = None
    if status is not None:
        if status.conditions:
            conditions = _conditions(status.conditions)
        info = status.nodeInfo
        if info is not None:
            # not interned: node_profile keys them by value, and the profile keeps the first copy
            kubelet, runtime = info.kubeletVersion or "", info.containerRuntimeVersion or ""
            kernel, os_image = info.kernelVersion or "", info.osImage or ""
        if status.addresses:
            flat: list[str] = []
            for a in status.addresses:
                flat += (_address_types.get(a.type) or _address_type(a.type), address_text(a.address or "", name))
            addresses = tuple(flat)
        if status.capacity:
            capacity = _map(status.capacity)
        if status.allocatable:
            allocatable = _map(status.allocatable)
        de = status.daemonEndpoints
        if de is not None and de.kubeletEndpoint is not None:
            port = de.kubeletEndpoint.Port
    return NodeRecord(
        name=name,
        labels=labels,
        profile=node_profile(labels, kubelet, runtime, kernel, os_image, capacity, allocatable, port),
        unschedulable=unschedulable,
        taints=taints,
        conditions=conditions,
        address_list=addresses,
        created=_time(meta.creationTimestamp),
    )


_address_types: dict[str | None, str] = {}
"""An address's type as decoded -> the interned one: a dict lookup instead of a call to intern."""


def _address_type(value: str | None) -> str:
    """The interned type, kept for the next node."""
    if len(_address_types) >= 64:  # there are five types; more is a cluster sending odd ones
        _address_types.clear()
    t = _address_types[value] = _i(value)
    return t


_maps_by_text: dict[bytes, dict[str, str]] = {}
"""A Node's capacity or allocatable as JSON text -> the shared map (``_shared_map``). The nodes of
one instance type send the same text (the API server writes a map's keys sorted), so the map is
decoded once per text, not built and looked up again for every node."""
_MAP_TEXT_MAX = 4096
"""Longer texts are decoded every time, not kept (a resource map is ~150 bytes)."""
_string_map = msgspec.json.Decoder(Optional[dict[str, str]])


def _decode_string_map(text: bytes) -> dict[str, str] | None:
    """``WireError`` when ``text`` is not a JSON map of strings (or null): the caller then reads
    the object as a dict."""
    try:
        return _string_map.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise WireError(str(exc)) from None


def _map(text: msgspec.Raw) -> dict[str, str]:
    """The shared map of ``capacity`` or ``allocatable`` as the dict path reads it."""
    key = bytes(text)
    hit = _maps_by_text.get(key)
    if hit is None:
        value = _decode_string_map(key)
        hit = _shared_map(value) if value else EMPTY_MAP
        if len(key) <= _MAP_TEXT_MAX and len(_maps_by_text) < SHARED_MAPS_MAX:
            _maps_by_text[key] = hit
    return hit


_common_labels_by_text: dict[bytes, dict[str, str]] = {}
"""A Node's labels as JSON text without its hostname label -> the pool's shared label set
(``node_labels``): the nodes of a pool differ only in that label, so the set is decoded once per
pool, not built and looked up again for every node."""
_HOSTNAME_KEY = b'"' + LABEL_HOSTNAME.encode() + b'":'


def _labels(text: msgspec.Raw, name: str) -> Labels:
    """``node_labels`` of the labels' JSON text; ``WireError`` when it is not a map of strings."""
    raw = bytes(text)
    if not raw:
        return NO_LABELS
    rest = _without_hostname(raw, name)
    if rest is not None:
        common = _common_labels_by_text.get(rest)
        if common is not None:
            return Labels(common, name)
        value = _decode_string_map(rest)
        if value is not None and LABEL_HOSTNAME not in value:  # else written twice, once escaped
            common = _shared_map(value, _label_sets)
            if len(rest) <= _MAP_TEXT_MAX and len(_common_labels_by_text) < SHARED_MAPS_MAX:
                _common_labels_by_text[rest] = common
            return Labels(common, name)
    return node_labels(_decode_string_map(raw), name, owned=True)


def _without_hostname(raw: bytes, name: str) -> bytes | None:
    """The labels' JSON text without ``"kubernetes.io/hostname":"<name>"`` (and a comma), when it
    holds that pair exactly so, once; else None (the caller decodes the whole text).

    Sound on any text the decoder took as JSON: the key's opening quote follows ``{`` or ``,`` so it
    is not escaped, and it cannot close a string (a bare word would follow); a name without quotes
    and backslashes is written without escapes and ends the value at the next quote; ``,`` or ``}``
    after it is structure. What is left is the same object without that one member."""
    if '"' in name or "\\" in name:  # written with escapes: not found as it is, or found where it is not
        return None
    at = raw.find(_HOSTNAME_KEY)
    if at <= 0 or raw.find(_HOSTNAME_KEY, at + 1) >= 0:
        return None
    member = _HOSTNAME_KEY + b'"' + name.encode() + b'"'
    if not raw.startswith(member, at):
        return None
    end = at + len(member)
    before, after = raw[at - 1], raw[end:end + 1]
    if before == 0x2C and after in (b",", b"}"):  # ,"k":"v" then , or }
        return raw[:at - 1] + raw[end:]
    if before == 0x7B and after == b",":  # {"k":"v",
        return raw[:at] + raw[end + 1:]
    if before == 0x7B and after == b"}":  # {"k":"v"}
        return raw[:at] + raw[end:]
    return None


_condition_texts = attrgetter("type", "status", "reason", "message")
_condition_times = attrgetter("lastHeartbeatTime", "lastTransitionTime")
_condition_shapes: dict[tuple, tuple[tuple | None, tuple[int, ...] | None]] = {}
"""The (type, status, reason, message) of a Node's conditions as decoded, in order -> the shape
their ``Conditions`` share and which conditions give the times (None: all, in order). Healthy nodes
of a fleet say the same: one lookup instead of interning 4 strings and making a row per condition,
and then one shape lookup. Emptied when full, as the shape table is."""


def _conditions(conds: list[_Condition]) -> Conditions:
    """A Node's conditions: the same as ``Conditions`` of the dict path's rows."""
    key = tuple(map(_condition_texts, conds))
    known = _condition_shapes.get(key)
    if known is None:
        if len(_condition_shapes) >= SHAPES_MAX:
            _condition_shapes.clear()
        known = _condition_shapes[key] = _condition_shape(conds)
    shape, order = known
    if shape is None:
        return NO_CONDITIONS
    if order is not None:
        conds = [conds[i] for i in order]
    times = list(map(_time_cache.get, chain.from_iterable(map(_condition_times, conds))))
    if None in times:  # a time not seen lately (or absent)
        times = [_time_or_nan(t) for t in chain.from_iterable(map(_condition_times, conds))]
    return Conditions.shaped(shape, array("d", times))


def _condition_shape(conds: list[_Condition]) -> tuple[tuple | None, tuple[int, ...] | None]:
    """(the shape, which conditions give the times) for conditions seen for the first time: those
    without a type left out, a type given twice in its first place with its last fields (as
    ``Conditions`` reads rows)."""
    at: dict[str, int] = {}
    for i, c in enumerate(conds):
        if c.type:
            at[c.type] = i
    if not at:
        return None, None
    order = tuple(at.values())
    rows = [(_i(c.type), _i(c.status) or "Unknown", _i(c.reason), _i(c.message), None, None)
            for c in (conds[i] for i in order)]
    return Conditions(rows).shape, None if order == tuple(range(len(conds))) else order


def _lease_record(le: _Lease | _WatchedLease) -> LeaseRecord | None:
    """The record of a typed Lease. The hot path of a fleet's steady state (13,000 renewals a second
    at 130k nodes), so written for it: every repeated string is compared with the one it usually
    is before interning, the times go through their memos, a kubelet's one managed-fields entry is
    read without a generator."""
    meta = le.metadata
    if meta is None:
        return None
    name = meta.name
    if not name:
        return None
    # the name and holder (the node's name) interned: one string for the node's record, its lease
    # track and the state's keys
    name = intern(name) if len(name) <= 256 else name
    namespace = meta.namespace
    namespace = NODE_LEASE_NAMESPACE if namespace == NODE_LEASE_NAMESPACE else _i(namespace)
    spec = le.spec
    if spec is None:
        holder, renew, duration = "", None, None
    else:
        holder = spec.holderIdentity
        holder = name if holder == name else _i(holder)
        renew = _micro_time(spec.renewTime)
        duration = _lease_seconds(spec.leaseDurationSeconds)
    managed = meta.managedFields
    if type(managed) is msgspec.Raw:  # a watched Lease's (``_WatchedLeaseMeta``): read if asked
        return LeaseRecord(name, namespace, holder, renew, duration, meta.resourceVersion or "",
                           None, _ManagedText(bytes(managed)) if managed else None)
    written = _written(managed, holder) if managed else None
    return LeaseRecord(name, namespace, holder, renew, duration, meta.resourceVersion or "", written)


class _ManagedText(Struct, gc=False):
    """A Lease's ``managedFields`` as JSON text (a copy: the stream's buffer is reused), for
    ``LeaseRecord.written_at`` to read if it is ever asked."""

    text: bytes

    def write_time(self, holder: str) -> float | None:
        """What the record of the full decode has (``_written``), its entries decoded once per text
        (``_entries_of``: a list's Leases written in one second share one; at 130,000 Leases each
        decoded alone was a third of the list's apply); what does not fit the types is read as the
        dict path reads it (``managed_write_time``), as a line that does not fit is."""
        entries = _entries_of(self.text)
        if entries is None:
            return managed_write_time(msgspec.json.decode(self.text), holder)
        return kubelet_write_time(entries, holder) if entries else None


_managed_fields = msgspec.json.Decoder(Optional[list[_ManagedField]])


def _written(managed: list[_ManagedField], holder: str) -> float | None:
    """``kubelet_write_time`` of the entries, their times through the time memo (whole seconds the
    renewals of a second share; ``parse_time`` takes the float it gives as it is). A Lease has one
    entry, its kubelet's: that one is looked at without building the triples."""
    if len(managed) == 1:
        m = managed[0]
        return kubelet_write_time(((m.manager, m.operation, _time(m.time)),), holder)
    return kubelet_write_time(((m.manager, m.operation, _time(m.time)) for m in managed), holder)


def lease_write_time(le: _Lease) -> float | None:
    """The ``written_at`` the record of this typed Lease has (its kubelet's last write), without
    building the record: ``replay/superseded.py`` predicts what a renewal sets."""
    meta = le.metadata
    if meta is None or not meta.managedFields:
        return None
    spec = le.spec
    return _written(meta.managedFields, (spec.holderIdentity or "") if spec is not None else "")


def watched_write_time(le: _WatchedLease) -> float | None:
    """The ``written_at`` of a watched Lease's record (``_lease_record(le).written_at``) without
    building the record: its managed fields' entries decoded once per text (the renewals of a
    second share one: their kubelets' entries differ only in the time), the holder applied to them
    each time. What the frontier of a lease stream asks of every read (``reflector._lane_written``):
    a record and a decode each cost a tenth of a renewal's ingest when a read is one renewal."""
    meta = le.metadata
    if meta is None:
        return None
    managed = meta.managedFields
    if type(managed) is not msgspec.Raw:
        return lease_write_time(le)  # (a fully decoded Lease)
    if not managed:
        return None
    entries = _entries_of(bytes(managed))
    if entries is None:
        rec = _lease_record(le)
        return rec.written_at if rec is not None else None
    if not entries:
        return None
    spec = le.spec
    return kubelet_write_time(entries, (spec.holderIdentity or "") if spec is not None else "")


_managed_entries: dict[bytes, Any] = {}
"""A Lease's managed fields (JSON text) -> their (manager, operation, time) entries, or None where
they do not fit the types (``_entries_of``)."""


def _entries_of(text: bytes) -> tuple[tuple[Any, Any, float | None], ...] | None:
    """A Lease's managed fields (JSON text) as (manager, operation, time) entries, decoded once per
    text (the renewals of a second share one: their kubelets' entries differ only in the time);
    None where they do not fit the types (the caller reads them as the dict path does)."""
    entries = _managed_entries.get(text, _MISSING)
    if entries is _MISSING:
        try:
            decoded = _managed_fields.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            entries = None
        else:
            entries = tuple((m.manager, m.operation, _time(m.time)) for m in decoded) if decoded else ()
        if len(_managed_entries) >= _TIME_CACHE_MAX:
            _managed_entries.clear()
        _managed_entries[text] = entries
    return entries


_micro_seconds: dict[str, int] = {}
"""The first 20 characters of a MicroTime (``2026-12-01T00:33:48.``) -> its whole seconds, for the
ones ``_micro_time`` may read without ``parse_time``: a fleet's renewals of one second share them.
Emptied when full, as the time memo is."""


def _micro_time(value: str | None) -> float | None:
    """``parse_time`` of a Lease's renewTime, a MicroTime (``2026-12-01T00:33:48.953171Z``), its whole
    seconds through a memo of the text before the fraction: parsing each was a third of building a
    Lease's record. The same float as ``parse_time`` (which divides whole microseconds by 10**6
    too); any other form, or a leap second, goes to ``parse_time``."""
    if value is not None and len(value) == 27:
        whole = _micro_seconds.get(value[:20])
        if whole is None:
            whole = _micro_whole(value[:20])
        if whole is not None:
            frac = value[20:26]
            if value[26] == "Z" and frac.isdigit() and frac.isascii():  # int() takes " 1", "+1", "1_0"
                return (whole * 1_000_000 + int(frac)) / 1_000_000
    return parse_time(value)


def _micro_whole(head: str) -> int | None:
    """The whole seconds of ``head`` (a MicroTime's first 20 characters), remembered, when it has
    the form ``_micro_time`` reads itself: ASCII ``YYYY-MM-DDTHH:MM:SS.``, not a leap second, and
    early enough that any fraction stays within ``MAX_TIME``; else None."""
    if not (head.isascii() and head[19] == "." and head[4] + head[7] + head[10] + head[13] + head[16] == "--T::"
            and head[17:19] < "60"):
        return None
    t = parse_time(head[:19] + "Z")
    if t is None or t + 1 > MAX_TIME:
        return None
    if len(_micro_seconds) >= _TIME_CACHE_MAX:
        _micro_seconds.clear()
    whole = _micro_seconds[head] = int(t)
    return whole


_durations: dict[int | float, float | None] = {}
"""leaseDurationSeconds -> ``seconds`` of it: one or two values in a fleet."""
_MISSING = object()


def _lease_seconds(d: int | float | None) -> float | None:
    """A Lease's ``leaseDurationSeconds`` as its record has it (``_duration``, the memo read first)."""
    duration = _durations.get(d, _MISSING) if d else _MISSING
    return _duration(d) if duration is _MISSING else duration  # type: ignore[return-value]


def _duration(value: int | float | None) -> float | None:
    """``seconds`` (range-checked as the dict reader does) with a memo."""
    if not value:  # None, and 0 / -0.0 kept apart
        return seconds(value)
    d = _durations.get(value, _MISSING)
    if d is _MISSING:
        if len(_durations) >= 64:
            _durations.clear()
        d = _durations[value] = seconds(value)
    return d  # type: ignore[return-value]


def pod_tolerations(raw: list[_Toleration]) -> tuple[Toleration, ...]:
    """A typed Pod's tolerations as its record has them."""
    return tuple(Toleration(key=t.key or "", operator=t.operator or "Equal", value=t.value or "", effect=t.effect or "",
                            seconds=seconds(t.tolerationSeconds))
                 for t in raw)


def _pod_record(p: _Pod) -> PodRecord | None:
    meta = p.metadata
    if meta is None or not meta.name:
        return None
    owner_kind = owner_name = ""
    owners = meta.ownerReferences
    if owners:
        chosen = next((o for o in owners if o.controller is True), owners[0])
        owner_kind, owner_name = chosen.kind or "", chosen.name or ""
    spec, status = p.spec, p.status
    tolerations: tuple[Toleration, ...] = ()
    node_name = phase = ""
    disruption = False
    if spec is not None:
        node_name = spec.nodeName or ""
        if spec.tolerations:
            tolerations = pod_tolerations(spec.tolerations)
    if status is not None:
        phase = status.phase or ""
        disruption = any(c.type == "DisruptionTarget" and c.status == "True" for c in status.conditions or ())
    return PodRecord(namespace=meta.namespace or "default", name=meta.name, node_name=node_name,
                     owner_kind=owner_kind, owner_name=owner_name, phase=phase,
                     deletion_timestamp=_time(meta.deletionTimestamp), tolerations=tolerations,
                     disruption_target=disruption, uid=meta.uid or "")


# --- decoders ------------------------------------------------------------------------------------

Record = NodeRecord | LeaseRecord | PodRecord


class TypedDecoder:
    """Lists and watch lines of one resource (nodes or leases), decoded into records."""

    def __init__(self, object_type: type, list_type: type, event_type: type, build) -> None:
        self._object = msgspec.json.Decoder(object_type)
        self._list = msgspec.json.Decoder(list_type)
        self._event = msgspec.json.Decoder(event_type)
        self._build = build

    def decode_object(self, data: bytes) -> Record | None:
        """One object (a recording line's); None without a name. Raises ``WireError`` when it
        does not fit the types."""
        try:
            obj = self._object.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise WireError(str(exc)) from None
        return self._build(obj)

    def decode_list(self, data: bytes) -> tuple[list[Record], str, str | None]:
        """(records, the list's resourceVersion, its continue token). Items without a name are
        left out. Raises ``WireError`` when the page does not fit the types."""
        try:
            page = self._list.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise WireError(str(exc)) from None
        build = self._build
        records = []
        for item in page.items or ():
            rec = build(item)
            if rec is not None:
                records.append(rec)
        meta = page.metadata
        if meta is None:
            return records, "", None
        return records, meta.resourceVersion or "", meta.continue_ or None

    def decode_event(self, line: bytes) -> tuple[str, Record | None, str]:
        """(type, record or None without a name, the object's resourceVersion) of an ADDED,
        MODIFIED or DELETED line. Raises ``WireError`` for anything else (ERROR, BOOKMARK: the
        caller reads those as dicts) and for what does not fit the types."""
        try:
            ev = self._event.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise WireError(str(exc)) from None
        etype = ev.type
        obj = ev.object
        if etype not in ("ADDED", "MODIFIED", "DELETED") or obj is None:
            raise WireError(f"event type {etype!r}")
        rv = obj.metadata.resourceVersion or "" if obj.metadata is not None else ""
        return etype, self._build(obj), rv

    def decode_watch(self, block: bytes | memoryview) -> list[Any]:
        """The events of a block of whole lines as the wire's structs (no records built), for a
        consumer that reads them itself (``Ingest.apply_lease_watch``). Raises ``WireError`` as
        ``decode_events`` does, for the same blocks."""
        try:
            events = self._event.decode_lines(block)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise WireError(str(exc)) from None
        for ev in events:
            if ev.type not in _OBJECT_EVENTS or ev.object is None:
                raise WireError(f"event type {ev.type!r}")
        return events

    def decode_events(self, block: bytes | memoryview) -> list[tuple[str, Record | None, str]]:
        """``decode_event`` for a block of whole lines in one C call: no line is cut out, no Python
        runs between lines (65,000 Nodes of a streaming list arrive as one block per read).
        Raises ``WireError`` if any line is not an ADDED, MODIFIED or DELETED event that fits the
        types: the caller then reads the block line by line, so nothing of it is lost."""
        try:
            events = self._event.decode_lines(block)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise WireError(str(exc)) from None
        out = []
        build = self._build
        for ev in events:
            etype = ev.type
            obj = ev.object
            if etype not in _OBJECT_EVENTS or obj is None:
                raise WireError(f"event type {etype!r}")
            meta = obj.metadata
            out.append((etype, build(obj), (meta.resourceVersion or "") if meta is not None else ""))
        return out


_OBJECT_EVENTS = frozenset(("ADDED", "MODIFIED", "DELETED"))

DECODERS: dict[str, TypedDecoder] = {
    "nodes": TypedDecoder(_Node, _NodeList, _NodeEvent, _node_record),
    "leases": TypedDecoder(_Lease, _LeaseList, _WatchedLeaseEvent, _lease_record),
    "pods": TypedDecoder(_Pod, _PodList, _PodEvent, _pod_record),
}
"""The resources with a typed decoder; the others (events, CSRs: few and small) are read as dicts."""
