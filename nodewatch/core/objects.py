"""Kubernetes objects (plain dicts from JSON) -> the slim records the core keeps.

Like client-go's informer transform, this keeps only the fields nodewatch reads, so a 65,000-node
fleet stays small in memory. Every reader is defensive: the cluster (or a recording) may send
objects with missing, null or wrongly typed fields; such fields become "unknown", and an object
without even a name raises ``BadObject`` with a message saying what is wrong.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from sys import intern
from typing import Any

from .rules import (
    LABEL_EXCLUDE_DISRUPTION,
    Taint,
    Toleration,
    zone_key,
)
from .timeutil import parse_time, seconds


class BadObject(ValueError):
    """An object nodewatch cannot use at all (no name, not a mapping)."""


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _s(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _i(value: Any) -> str:
    """An interned string: label keys and values, reasons and versions repeat on every node,
    and one shared copy keeps a 65,000-node fleet small."""
    s = _s(value)
    return intern(s) if len(s) <= 256 else s


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    try:
        return {intern(k): intern(v) if len(v) <= 256 else v for k, v in value.items()}
    except TypeError:  # a key or value that is not a string: the slow, forgiving way
        return {_i(k): _i(v) for k, v in value.items()}


def _num(value: Any) -> float | None:
    """A duration field, range-checked where it is read (``timeutil.seconds``: NaN is unknown,
    1e308 is a century)."""
    return seconds(value)


EMPTY_MAP: dict[str, str] = {}
"""The one empty map records share (never mutated)."""
_shared_maps: dict[tuple[Any, ...], dict[str, str]] = {}
"""Capacity and allocatable maps, one per distinct map."""
_label_sets: dict[tuple[Any, ...], dict[str, str]] = {}
"""Node label sets without the hostname label, one per distinct set (a pool's nodes share one)."""
SHARED_MAPS_MAX = 10_000
"""Distinct maps kept for sharing, per kind; beyond it (a fleet whose every node has its own labels)
new maps are simply not shared."""


def _shared_map(value: Any, shared: dict[tuple[Any, ...], dict[str, str]] = _shared_maps) -> dict[str, str]:
    """A string map that many nodes share (capacity, allocatable of one instance type, the labels of
    one pool), held once.

    Callers must not mutate the result."""
    if not isinstance(value, dict):
        return EMPTY_MAP
    try:
        key = tuple(value.items())
        hit = shared.get(key)
    except TypeError:  # unhashable values
        return _str_map(value)
    if hit is not None:
        return hit
    m = _str_map(value)
    if len(shared) < SHARED_MAPS_MAX:
        shared[key] = m
    return m


LABEL_HOSTNAME = "kubernetes.io/hostname"


class Labels(Mapping[str, str]):
    """A node's labels, read-only: every label, held as the part its pool shares plus its hostname.

    Why: the nodes of a pool carry the same labels except ``kubernetes.io/hostname``, which repeats
    the node's name. A dict per node was ~0.45 KB for 11 labels (30 MB at 65,000 nodes); here the
    other labels are one dict per distinct set (``_label_sets``) and the hostname is the record's
    own name string, ~50 bytes a node. A hostname label that is not the node's name stays in the
    shared part, like any label. Not a dict: a JSON writer takes ``dict(labels)``."""

    __slots__ = ("common", "host")

    def __init__(self, common: dict[str, str], host: str | None = None) -> None:
        self.common = common
        """Every label but a hostname label equal to the node's name (shared: never mutated)."""
        self.host = host
        """The hostname label's value when it was split off (the node's name), else None."""

    def __getitem__(self, key: str) -> str:
        if self.host is not None and key == LABEL_HOSTNAME:
            return self.host
        return self.common[key]

    def get(self, key: str, default: Any = None) -> Any:
        if self.host is not None and key == LABEL_HOSTNAME:
            return self.host
        return self.common.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.common or (self.host is not None and key == LABEL_HOSTNAME)

    def __iter__(self) -> Iterator[str]:
        yield from self.common
        if self.host is not None:
            yield LABEL_HOSTNAME

    def __len__(self) -> int:
        return len(self.common) + (self.host is not None)

    def items(self) -> list[tuple[str, str]]:  # type: ignore[override]
        """Every (key, value), the shared ones first (a list: faster than a view for a search that
        reads every node's labels)."""
        out = list(self.common.items())
        if self.host is not None:
            out.append((LABEL_HOSTNAME, self.host))
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Labels) and self.common is other.common:
            return self.host == other.host
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled as its two parts (the shared one stays shared within one pickle); ``NO_LABELS``
        by name, so it stays the one."""
        return "NO_LABELS" if self is NO_LABELS else (Labels, (self.common, self.host))

    def __repr__(self) -> str:
        return f"Labels({dict(self.items())!r})"


NO_LABELS = Labels({})


def node_labels(value: Any, name: str, owned: bool = False) -> Labels:
    """A Node's ``metadata.labels`` (as decoded) for the node ``name``: see ``Labels``. ``owned``:
    the dict is the caller's own, thrown away afterwards (the typed decoder's), and may lose its
    hostname label instead of being copied."""
    if not isinstance(value, dict) or not value:
        return NO_LABELS
    if value.get(LABEL_HOSTNAME) == name:
        rest = value if owned else dict(value)
        del rest[LABEL_HOSTNAME]
        return Labels(_shared_map(rest, _label_sets), name)
    return Labels(_shared_map(value, _label_sets))


def _meta(obj: Any, kind: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise BadObject(f"{kind}: expected a JSON object, got {type(obj).__name__}")
    meta = _d(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise BadObject(f"{kind}: object without metadata.name")
    return meta


@dataclass(slots=True)
class Condition:
    """One of a node's conditions, as ``Conditions`` hands it out (made when asked)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_heartbeat: float | None = None
    last_transition: float | None = None


NO_TIME = math.nan
"""A time that is unknown, in a node's array of condition times (no parsed time is NaN)."""
_shapes: dict[tuple[Any, ...], tuple[dict[str, int], tuple[tuple[str, str, str], ...], frozenset[str]]] = {}
"""(type, status, reason, message) of a node's conditions, in order -> its shape: where each type
is, the texts, and the types whose status is True. Healthy nodes of one kubelet version share one."""
SHAPES_MAX = 4096
"""Shapes kept for sharing; when full the memo starts again (records keep theirs): a fleet whose
messages differ node by node (``PLEG ... last seen active 3m2.5s ago``) does not grow it."""


class Conditions(Mapping[str, Condition]):
    """A node's conditions by type, read-only: ``get("Ready")`` gives a ``Condition``.

    Why not a dict of ``Condition`` objects: that was ~0.6 KB a node (a dict and five objects of six
    fields; 38 MB at 65,000 nodes). What differs from node to node is the times; types, statuses,
    reasons and messages repeat across the fleet. So a node holds a shape shared with every node
    whose conditions say the same (``_shapes``) and one array of its heartbeat and transition
    times; a ``Condition`` is made when one is asked for, ``status(type)`` answers without one."""

    __slots__ = ("_shape", "_times")

    def __init__(self, rows: list[tuple[str, str, str, str, float | None, float | None]] = ()) -> None:  # type: ignore[assignment]
        """``rows``: (type, status, reason, message, heartbeat, transition) in the Node's order; a
        type given twice keeps its first place and its last fields (as a dict does)."""
        key = tuple([r[:4] for r in rows])
        if len({r[0] for r in rows}) != len(rows):
            by_type = {r[0]: r for r in rows}
            rows = list(by_type.values())
            key = tuple([r[:4] for r in rows])
        shape = _shapes.get(key)
        if shape is None:
            shape = ({r[0]: i for i, r in enumerate(rows)}, tuple([r[1:4] for r in rows]),
                     frozenset(r[0] for r in rows if r[1] == "True"))
            if len(_shapes) >= SHAPES_MAX:
                _shapes.clear()
            _shapes[key] = shape
        self._shape = shape
        self._times = array("d", [NO_TIME if t is None else t for r in rows for t in (r[4], r[5])])

    @classmethod
    def shaped(cls, shape: tuple[Any, ...], times: array[float]) -> Conditions:
        """Conditions from the shape of an equal ``Conditions(rows)`` (``shape``) and their times,
        heartbeat and transition per condition in the shape's order, NaN for unknown: what the
        typed decoder builds when it has seen these texts before, without making rows."""
        c = cls.__new__(cls)
        c._shape = shape
        c._times = times
        return c

    @property
    def shape(self) -> tuple[Any, ...]:
        """The shape these conditions share with every node whose conditions say the same (for
        ``shaped``; read-only)."""
        return self._shape

    def get(self, ctype: str, default: Any = None) -> Any:
        at, texts, _ = self._shape
        i = at.get(ctype)
        if i is None:
            return default
        status, reason, message = texts[i]
        hb, tr = self._times[2 * i], self._times[2 * i + 1]
        return Condition(ctype, status, reason, message, None if hb != hb else hb, None if tr != tr else tr)

    def last_transition(self, ctype: str) -> float | None:
        """The condition's lastTransitionTime (None without one), without building the Condition:
        the evaluation reads Ready's for every node."""
        i = self._shape[0].get(ctype)
        if i is None:
            return None
        tr = self._times[2 * i + 1]
        return None if tr != tr else tr

    def status(self, ctype: str) -> str | None:
        """The condition's status; None without one."""
        at, texts, _ = self._shape
        i = at.get(ctype)
        return None if i is None else texts[i][0]

    @property
    def true(self) -> frozenset[str]:
        """The types whose status is True (worked out once per shape: the pressure and network
        checks of every evaluation read it)."""
        return self._shape[2]

    def __getitem__(self, ctype: str) -> Condition:
        c: Condition | None = self.get(ctype)
        if c is None:
            raise KeyError(ctype)
        return c

    def __contains__(self, ctype: object) -> bool:
        return ctype in self._shape[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._shape[0])

    def __len__(self) -> int:
        return len(self._shape[0])

    def values(self) -> list[Condition]:  # type: ignore[override]
        """Every condition in the Node's order."""
        return [self.get(t) for t in self._shape[0]]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Conditions):
            return (self._shape is other._shape or self._shape == other._shape) and \
                self._times.tobytes() == other._times.tobytes()
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(zip(self, self.values())) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled as the shape (shared within one pickle) and the times' bytes: an ``array``
        pickles through its own reconstructor, a third of the time a batch of records took to
        pickle. ``NO_CONDITIONS`` by name, so it stays the one."""
        if self is NO_CONDITIONS:
            return "NO_CONDITIONS"
        return _unpickle_conditions, (self._shape, self._times.tobytes())

    def __repr__(self) -> str:
        return f"Conditions({self.values()!r})"


_ONE_TIME = array("d", [NO_TIME])


def _unpickle_conditions(shape: tuple[Any, ...], times: bytes) -> Conditions:
    """Unpickles a ``Conditions``. The array is made at its size and filled (``frombytes`` leaves
    room to grow: 24 bytes more a node, 1.5 MB at 65,000)."""
    a = _ONE_TIME * (len(times) // _ONE_TIME.itemsize)
    memoryview(a).cast("B")[:] = times
    return Conditions.shaped(shape, a)


NO_CONDITIONS = Conditions()


@dataclass(slots=True)
class NodeProfile:
    """What the nodes of one pool share: placement, versions, resources. One object per distinct
    profile (``node_profile``), so a record holds one reference instead of nine fields. Never mutated."""

    zone: str = ""
    exclude_disruption: bool = False
    kubelet_version: str = ""
    runtime_version: str = ""
    kernel_version: str = ""
    os_image: str = ""
    capacity: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    kubelet_port: int | None = None

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled as its fields (once per pickle: records share it); ``NO_PROFILE`` by name."""
        if self is NO_PROFILE:
            return "NO_PROFILE"
        return NodeProfile, (self.zone, self.exclude_disruption, self.kubelet_version, self.runtime_version,
                             self.kernel_version, self.os_image, self.capacity, self.allocatable, self.kubelet_port)


NO_PROFILE = NodeProfile()
_profiles: dict[tuple[Any, ...], NodeProfile] = {}
PROFILES_MAX = 4096
"""Profiles kept for sharing; when full the memo starts again (records keep theirs)."""
_pool_profiles: dict[tuple[Any, ...], tuple[dict[str, str], NodeProfile]] = {}
"""The same profiles, keyed by the shared label set itself (identity) rather than by the placement
worked out from it: the nodes of a pool share their labels' dict, so most nodes skip ``zone_key``.
The value keeps the label set alive, so its identity is not reused while the key is."""


def node_profile(labels: Mapping[str, str], kubelet: str, runtime: str, kernel: str, os_image: str,
                 capacity: dict[str, str], allocatable: dict[str, str], port: int | None) -> NodeProfile:
    """The shared profile of a node with these labels, versions and resources. Capacity and
    allocatable are shared maps already (``_shared_map``): known by identity; a cached profile keeps
    its maps alive, so an identity in a key is never reused while the key is."""
    common = labels.common if type(labels) is Labels else None  # the hostname is not placement
    if common is not None:
        pool = (id(common), kubelet, runtime, kernel, os_image, id(capacity), id(allocatable), port)
        hit = _pool_profiles.get(pool)
        if hit is not None:
            return hit[1]
    zone = intern(zone_key(labels))
    excluded = LABEL_EXCLUDE_DISRUPTION in labels
    key = (zone, excluded, kubelet, runtime, kernel, os_image, id(capacity), id(allocatable), port)
    profile = _profiles.get(key)
    if profile is None:
        profile = NodeProfile(zone, excluded, kubelet, runtime, kernel, os_image, capacity, allocatable, port)
        if len(_profiles) >= PROFILES_MAX:
            _profiles.clear()
        _profiles[key] = profile
    if common is not None:
        if len(_pool_profiles) >= PROFILES_MAX:
            _pool_profiles.clear()
        _pool_profiles[pool] = (common, profile)
    return profile


def _shared(name: str) -> property:  # a property reading the profile
    return property(lambda rec: getattr(rec.profile, name), doc=f"The node's ``{name}`` (its profile's).")


@dataclass(slots=True)
class NodeRecord:
    """What nodewatch keeps of a Node: ~0.5 KB of a 3-20 KB object. At 65,000 nodes every field
    costs megabytes, so only what is read is kept (no uid, no resourceVersion: nothing reads them),
    and what nodes share is held once (labels, profile, condition texts)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    """A ``Labels`` (a plain dict in a hub viewer's copy)."""
    profile: NodeProfile = field(default_factory=lambda: NO_PROFILE)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    conditions: Mapping[str, Condition] = field(default_factory=lambda: NO_CONDITIONS)
    """A ``Conditions`` (a plain dict in a hub viewer's copy)."""
    address_list: tuple[str, ...] = ()
    """``status.addresses`` flat: type, address, type, address... (one tuple a node, not one per
    address). Read ``addresses`` for the pairs."""
    created: float | None = None
    awaited: bool = False
    """A placeholder: the node is known from its Lease, its Node object has not arrived yet."""

    zone = _shared("zone")
    exclude_disruption = _shared("exclude_disruption")
    kubelet_version = _shared("kubelet_version")
    runtime_version = _shared("runtime_version")
    kernel_version = _shared("kernel_version")
    os_image = _shared("os_image")
    capacity = _shared("capacity")
    allocatable = _shared("allocatable")
    kubelet_port = _shared("kubelet_port")

    @property
    def ready(self) -> str | None:
        """The Ready condition's status (None without one), without building the Condition where
        the conditions are the shared-shape kind (every record the decoders make)."""
        conds = self.conditions
        if isinstance(conds, Conditions):
            return conds.status("Ready")
        c = conds.get("Ready")
        return c.status if c else None

    @property
    def addresses(self) -> tuple[tuple[str, str], ...]:
        """(type, address) pairs, in the Node's order."""
        a = self.address_list
        return tuple(zip(a[::2], a[1::2]))

    def _values(self) -> tuple[Any, ...]:
        """Every field, in order (the arguments that make this record again)."""
        return (self.name, self.labels, self.profile, self.unschedulable, self.taints, self.conditions,
                self.address_list, self.created, self.awaited)

    def __copy__(self) -> NodeRecord:
        """A copy sharing its labels and conditions (``__reduce__`` would make new ones)."""
        return NodeRecord(*self._values())

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickled flat, its labels' and conditions' parts among its own fields: one call to
        rebuild it instead of three objects each pickled with a dict of its slots (65,000 records
        in batches of 1,000, from the list worker to the dashboard: dumps 0.29 -> 0.11 s, loads
        0.13 -> 0.08 s, bench/decode_build.py). ``AWAITED`` by name, so it stays the one."""
        if self is AWAITED:
            return "AWAITED"
        labels, conditions = self.labels, self.conditions
        if type(labels) is not Labels or labels is NO_LABELS or type(conditions) is not Conditions or \
                conditions is NO_CONDITIONS:
            return NodeRecord, self._values()
        return _unpickle_node, (self.name, labels.common, labels.host, self.profile, self.unschedulable,
                                self.taints, conditions._shape, conditions._times.tobytes(), self.address_list,
                                self.created, self.awaited)


def _unpickle_node(name: str, common: dict[str, str], host: str | None, profile: NodeProfile,
                   unschedulable: bool, taints: tuple[Taint, ...], shape: tuple[Any, ...], times: bytes,
                   address_list: tuple[str, ...], created: float | None, awaited: bool) -> NodeRecord:
    """Unpickles a ``NodeRecord`` (``NodeRecord.__reduce__``). The name is interned, and the
    hostname label and addresses that repeat it take that one string: the Lease's name and holder
    are the same interned string, so a node's name is held once (65,000 unpickled copies were 5 MB
    of the dashboard's memory)."""
    own = intern(name)
    if own is not name:
        if host == name:
            host = own
        if name in address_list:
            address_list = tuple([own if a == name else a for a in address_list])
    return NodeRecord(own, Labels(common, host), profile, unschedulable, taints, _unpickle_conditions(shape, times),
                      address_list, created, awaited)


AWAITED = NodeRecord(name="", awaited=True)
"""The placeholder record of every node whose Lease has arrived and whose Node has not: Leases are
small and listed first, so a 65,000-node fleet shows every heartbeat before the Nodes (670 MB of
JSON) are in. No labels, no conditions: the lease alone decides its state. One shared record (its
views carry the node's name): readers must not change it."""


def node_from_dict(obj: Any) -> NodeRecord:
    """The record of a Node as parsed JSON; a record decoded already (``wire``) passes through."""
    if type(obj) is NodeRecord:
        return obj
    meta = _meta(obj, "Node")
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    name = intern(meta["name"])
    labels = node_labels(meta.get("labels"), name)
    taints = []
    for t in _l(spec.get("taints")):
        t = _d(t)
        if not t.get("key"):
            continue
        taints.append(
            Taint(key=_s(t.get("key")), effect=_s(t.get("effect")), value=_s(t.get("value")),
                  time_added=parse_time(t.get("timeAdded")))
        )
    rows = []
    for c in _l(status.get("conditions")):
        c = _d(c)
        ctype = _i(c.get("type"))
        if not ctype:
            continue
        rows.append((ctype, _i(c.get("status")) or "Unknown", _i(c.get("reason")), _i(c.get("message")),
                     parse_time(c.get("lastHeartbeatTime")), parse_time(c.get("lastTransitionTime"))))
    info = _d(status.get("nodeInfo"))
    port = _d(_d(_d(status.get("daemonEndpoints")).get("kubeletEndpoint"))).get("Port")
    addresses: list[str] = []
    for a in _l(status.get("addresses")):
        a = _d(a)
        addresses += (_i(a.get("type")), address_text(_s(a.get("address")), name))
    return NodeRecord(
        name=name,
        labels=labels,
        profile=node_profile(labels, _i(info.get("kubeletVersion")), _i(info.get("containerRuntimeVersion")),
                             _i(info.get("kernelVersion")), _i(info.get("osImage")),
                             _shared_map(status.get("capacity")), _shared_map(status.get("allocatable")),
                             int(port) if isinstance(port, int) and not isinstance(port, bool) else None),
        unschedulable=spec.get("unschedulable") is True,
        taints=tuple(taints),
        conditions=Conditions(rows) if rows else NO_CONDITIONS,
        address_list=tuple(addresses),
        created=parse_time(meta.get("creationTimestamp")),
    )


def address_text(address: str, name: str) -> str:
    """An address, sharing the node's name string when it repeats it (Hostname, often InternalDNS)."""
    return name if address == name else address


NODE_LEASE_NAMESPACE = "kube-node-lease"
"""Where the kubelets' Leases live (the only Leases that are node heartbeats)."""


class LeaseRecord:
    """A node's Lease as nodewatch reads it. Never mutated once read (``written_at`` is worked out
    at most once, on first read, from the managed fields' text the typed decoder kept: a renewal
    on the watch, nearly all the traffic, is timed by its receipt and never asks, and decoding the
    managed fields was a fifth of decoding it)."""

    __slots__ = ("name", "namespace", "holder", "renew_time", "duration_seconds", "resource_version",
                 "_written", "_managed")

    def __init__(self, name: str, namespace: str, holder: str, renew_time: float | None,
                 duration_seconds: float | None, resource_version: str = "", written_at: float | None = None,
                 managed: Any = None) -> None:
        self.name = name
        self.namespace = namespace
        self.holder = holder
        self.renew_time = renew_time
        self.duration_seconds = duration_seconds
        self.resource_version = resource_version
        self._written = written_at
        self._managed = managed
        """Until ``written_at`` is read: an object whose ``write_time(holder)`` gives it (the typed
        decoder's, ``wire``), or None."""

    @property
    def written_at(self) -> float | None:
        """The API server's own time (whole seconds) of the holder's last write that changed its
        fields (``kubelet_write_time``); None when the object does not say."""
        managed = self._managed
        if managed is not None:
            self._written = managed.write_time(self.holder)
            self._managed = None
        return self._written

    def _fields(self) -> tuple[Any, ...]:
        return (self.name, self.namespace, self.holder, self.renew_time, self.duration_seconds,
                self.resource_version, self.written_at)

    def __eq__(self, other: object) -> bool:
        if type(other) is not LeaseRecord:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # equal by value, and not frozen: as the dataclass was

    def __repr__(self) -> str:
        names = ("name", "namespace", "holder", "renew_time", "duration_seconds", "resource_version", "written_at")
        return "LeaseRecord(" + ", ".join(f"{k}={v!r}" for k, v in zip(names, self._fields())) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its fields: a tuple, not the dict of slots ``object`` pickles by default."""
        return LeaseRecord, self._fields()


KUBELET_MANAGER = "kubelet"
"""The field manager of the kubelet's writes: the API server names a manager after the client's
User-Agent up to the first "/" (``kubelet/v1.30.2 (linux/amd64) ...``)."""
KUBELET_MANAGERS = frozenset({KUBELET_MANAGER, "kubemark", "hollow-kubelet"})
"""Every field manager of a kubelet's writes: ``kubelet``, and kubemark's hollow node (the real
kubelet's code on a fake runtime, the testbed's real kubelets): ``kubemark`` on v1.20, where its
client keeps the binary's default User-Agent, ``hollow-kubelet`` on current releases, which set it."""


def kubelet_write_time(entries: Any, holder: str) -> float | None:
    """The newest ``managedFields[].time`` of an Update by the Lease's kubelet (the manager
    ``kubelet``, or one named as the holder), on the API server's clock. ``entries`` are
    ``(manager, operation, time)`` triples. From v1.25 the server moves this time on every write
    that changes a value, so it is the server's time of the last renewal; before that it moves only
    when the writer's set of fields changes (the Lease's creation): an earlier bound, never later."""
    newest = None
    for manager, operation, when in entries:
        if operation == "Update" and isinstance(manager, str) and (manager in KUBELET_MANAGERS or (holder and manager == holder)):
            t = parse_time(when)
            if t is not None and (newest is None or t > newest):
                newest = t
    return newest


def lease_from_dict(obj: Any) -> LeaseRecord:
    """The record of a Lease as parsed JSON; a record decoded already (``wire``) passes through."""
    if type(obj) is LeaseRecord:
        return obj
    meta = _meta(obj, "Lease")
    spec = _d(obj.get("spec"))
    holder = _i(spec.get("holderIdentity"))
    return LeaseRecord(
        name=_i(meta["name"]),
        namespace=_s(meta.get("namespace")),
        holder=holder,
        renew_time=parse_time(spec.get("renewTime")),
        duration_seconds=_num(spec.get("leaseDurationSeconds")),
        resource_version=_s(meta.get("resourceVersion")),
        written_at=managed_write_time(meta.get("managedFields"), holder),
    )


def managed_write_time(managed: Any, holder: str) -> float | None:
    """``kubelet_write_time`` of a Lease's ``metadata.managedFields`` as parsed JSON (whatever its
    shape: what is not a list of mappings says nothing)."""
    entries = [_d(m) for m in _l(managed)]
    return kubelet_write_time(((m.get("manager"), m.get("operation"), m.get("time")) for m in entries), holder)


@dataclass(slots=True)
class PodRecord:
    namespace: str
    name: str
    node_name: str
    owner_kind: str = ""
    owner_name: str = ""
    phase: str = ""
    deletion_timestamp: float | None = None
    tolerations: tuple[Toleration, ...] = ()
    disruption_target: bool = False
    uid: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None


def pod_from_dict(obj: Any) -> PodRecord:
    """The record of a Pod as parsed JSON; a record decoded already (``wire``) passes through."""
    if type(obj) is PodRecord:
        return obj
    meta = _meta(obj, "Pod")
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    owner_kind = owner_name = ""
    owners = _l(meta.get("ownerReferences"))
    chosen = next((o for o in owners if _d(o).get("controller") is True), owners[0] if owners else None)
    if chosen is not None:
        owner_kind, owner_name = _s(_d(chosen).get("kind")), _s(_d(chosen).get("name"))
    tolerations = []
    for t in _l(spec.get("tolerations")):
        t = _d(t)
        tolerations.append(
            Toleration(key=_s(t.get("key")), operator=_s(t.get("operator")) or "Equal",
                       value=_s(t.get("value")), effect=_s(t.get("effect")),
                       seconds=_num(t.get("tolerationSeconds")))
        )
    disruption = any(
        _d(c).get("type") == "DisruptionTarget" and _d(c).get("status") == "True"
        for c in _l(status.get("conditions"))
    )
    return PodRecord(
        namespace=_s(meta.get("namespace")) or "default",
        name=meta["name"],
        node_name=_s(spec.get("nodeName")),
        owner_kind=owner_kind,
        owner_name=owner_name,
        phase=_s(status.get("phase")),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp")),
        tolerations=tuple(tolerations),
        disruption_target=disruption,
        uid=_s(meta.get("uid")),
    )


@dataclass(slots=True)
class EventRecord:
    namespace: str
    name: str
    time: float | None
    reason: str
    message: str
    type: str
    source: str
    object_kind: str
    object_name: str
    object_uid: str
    count: int = 1

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


def event_from_dict(obj: Any) -> EventRecord:
    meta = _meta(obj, "Event")
    inv = _d(obj.get("involvedObject") or obj.get("regarding"))
    src = _d(obj.get("source"))
    source = _s(src.get("component") or obj.get("reportingComponent") or obj.get("reportingController"))
    host = _s(src.get("host"))
    if host and source:
        source = f"{source}, {host}"
    t = (
        parse_time(obj.get("lastTimestamp"))
        or parse_time(_d(obj.get("series")).get("lastObservedTime"))
        or parse_time(obj.get("eventTime"))
        or parse_time(obj.get("firstTimestamp"))
        or parse_time(meta.get("creationTimestamp"))
    )
    count = obj.get("count")
    return EventRecord(
        namespace=_s(meta.get("namespace")) or "default",
        name=meta["name"],
        time=t,
        reason=_s(obj.get("reason")),
        message=_s(obj.get("message") or obj.get("note")),
        type=_s(obj.get("type")),
        source=source,
        object_kind=_s(inv.get("kind")),
        object_name=_s(inv.get("name")),
        object_uid=_s(inv.get("uid")),
        count=count if isinstance(count, int) and not isinstance(count, bool) and 0 < count <= 10**9 else 1,
    )


@dataclass(slots=True)
class CSRRecord:
    name: str
    username: str
    signer: str
    not_after: float | None
    issued_at: float | None = None
    subject: str | None = None
    """The issued certificate's subject common name (a kubelet's: ``system:node:<name>``): who the
    certificate is for. ``username`` is who asked, which for a kubelet's first certificate is its
    bootstrap credential (``system:bootstrap:<token id>`` with kubeadm), not the node."""


def csr_from_dict(obj: Any) -> CSRRecord:
    from .certs import certificate_facts  # cryptography is imported only when a CSR arrives

    meta = _meta(obj, "CertificateSigningRequest")
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    pem = status.get("certificate")
    facts = certificate_facts(pem) if pem else None
    not_after, subject = facts if facts is not None else (None, None)
    issued = None
    for c in _l(status.get("conditions")):
        c = _d(c)
        if c.get("type") == "Approved":
            issued = parse_time(c.get("lastUpdateTime")) or parse_time(c.get("lastTransitionTime"))
    return CSRRecord(
        name=meta["name"],
        username=_s(spec.get("username")),
        signer=_s(spec.get("signerName")),
        not_after=not_after,
        issued_at=issued,
        subject=subject,
    )
