"""Events a one-shot answer may leave out: those a later event on the same object supersedes, and
the Pods an answer without ``--node`` never reads.

Why: nine lines in ten of a recording are Lease renewals, each node's every 10 s. ``status --replay
--at T`` needs the state at T, not the way there: of the 30 renewals a node made in five minutes,
the last one decides everything the answer shows. Decoding and applying the other 29 was most of
the command's time; after them, the Node status updates and the Pod list.

When a renewal may be left out, exactly: a renewal ``L`` that advances its lease's renewTime sets
every field of the lease's track that a view reads (when it was observed, on which clock, its
skew, renewTime, duration, holder) from ``L`` and at most what the track held before. Received on
the watch once the lease list was in, from ``L`` alone (``Ingest._on_lease``: "advanced",
"known"). Otherwise (no ``SYNCED`` line for the leases, as in a recording another tool wrote, a
relist) it is timed as a listed renewal (``ingest.listed_renewal``), from the renewal seen before it
and the skew kept from earlier: this module follows each lease's track as ``_on_lease`` would set
it (``_LeaseSeen``, the same ``listed_renewal``, the server version the state has at that point),
and ``L`` supersedes what came before when it leaves the very track it would leave applied alone.
Whatever came before ``L`` on that lease can then change nothing an answer shows, and is dropped.
A Node update without a not-ready/unreachable NoExecute taint replaces the node's record whole
(``keep_eviction_start`` carries nothing over): the updates before it are dropped the same way.
What is not kept exact: the renewal count, the heartbeat history and the node's timeline (the
dashboard's drill-down alone shows them; a one-shot answer has none of them).

Only clean lines are ever dropped: an ordinary event line whose object the typed decoder reads with
a name (applying it would record no problem). Anything else (a DELETED, an object read through the
dict fallback) is applied where it comes; on a lease, one that could move renewTime without this
module knowing by how much stops any later drop on that lease. The time of the last event received
and each stream's last activity come from the last event of each object, which is never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import msgspec

from ...core.ingest import listed_renewal
from ...core.objects import BadObject, LeaseRecord, pod_from_dict
from ...core.pod_tolerations import Seconds, Tally, seconds_of
from ...core.rules import EVICTION_TAINTS
from ...core.wire import (  # the typed decoder's own: what it reads, and the record it builds
    _Lease,
    _lease_record,
    _micro_time,
    _Node,
    _Pod,
    lease_write_time,
    pod_tolerations,
)
from ..kubectl_typed import KubectlLease, KubectlNode, renew_time, slim
from ..recording import Entry
from .lines import _Line, parse, plain_fields

NODE_LEASE_NAMESPACES = ("", "kube-node-lease")
"""Namespaces whose Leases are node heartbeats (``Ingest._on_lease`` ignores the others)."""

_decode_node = msgspec.json.Decoder(_Node).decode
_DECODE = {
    "leases": msgspec.json.Decoder(_Lease).decode,
    "nodes": _decode_node,
    "pods": msgspec.json.Decoder(_Pod).decode,
}


class Deferred(msgspec.Struct, gc=False):
    """A clean event line of a Lease, Node or Pod, its object not made a record yet (``entry``
    does, if the line is applied). A Struct untracked by the cyclic collector: made for every
    line, it holds no cycle (cheaper to make and free than a dataclass)."""

    line: int
    t: float
    resource: str
    etype: str
    listing: bool
    cluster: str | None
    name: str
    renew: float | None
    """A Lease's renewTime, as its record will have it."""
    replaces: bool
    """A Node's update that replaces its record whole (no eviction taint)."""
    data: bytes | None
    """The line itself (None for a Lease: its record is built from ``lease``)."""
    lease: Any = None
    """A Lease's typed object (its kubelet's write time is read from it only if needed)."""
    node: Any = None
    """A kubectl log's Node record (``KubectlNode.record``)."""
    namespace: str = ""
    """A Pod's namespace (its name alone does not tell it from another namespace's)."""
    seconds: Any = None
    """A Pod's tolerations of the eviction taints (``pod_tolerations.seconds_of``)."""

    def entry(self, problems: list[str]) -> Entry | None:
        """The entry ``lines.parse`` makes of the line, now that it is applied. A Lease's record is
        built from its typed object, as ``parse`` would build it from the same decode: the line's
        bytes are not kept while the renewal waits (a foreign renewal line is ~1 KB, and 30 s of
        them wait in the reorder window). A kubectl log's Node has its record."""
        if self.lease is not None:
            return Entry(self.line, self.t, self.resource, self.etype, _lease_record(self.lease), self.listing,
                         None, self.cluster)
        if self.node is not None:
            return Entry(self.line, self.t, self.resource, self.etype, self.node, self.listing, None, self.cluster)
        return parse(self.line, self.data or b"", problems)


class _LeaseLine(_Line, gc=False):
    """A recording line whose object is read as a Lease in the same decode (``deferred_lease``)."""

    object: Optional[_Lease] = None


_decode_lease_line = msgspec.json.Decoder(_LeaseLine).decode


def deferred_lease(n: int, line: bytes) -> Deferred | None:
    """``deferred`` of a clean Lease line, decoded in one pass: nine lines in ten are renewals, and
    reading the line (its object kept raw) then the object again was two passes over the same
    bytes. None for any other line, and for one this decode refuses: the caller reads it the
    ordinary way (``plain_line``, then ``deferred``), which gives the same for a line read here
    (the same checks, ``_Lease`` the same type)."""
    if b'"leases"' not in line:  # a cheap sieve only: a line spelt otherwise goes the ordinary way
        return None
    try:
        d = _decode_lease_line(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if d.resource != "leases" or d.type not in ("ADDED", "MODIFIED") or d.object is None or not plain_fields(d):
        return None
    return _made(n, line, d, "leases", d.object)


def deferred(n: int, line: bytes, d: Any, pods: bool = True) -> Deferred | None:
    """The ``Deferred`` of a line whose ``lines.plain_event`` is ``d`` (not None); None when the
    line is not a clean ADDED or MODIFIED Lease (of a node) or Node, or (``pods`` False: the answer
    reads none) a clean Pod event: it is then parsed and applied in full."""
    resource = d.resource
    decode = _DECODE.get(resource)
    if resource == "pods":
        if pods or d.type not in ("ADDED", "MODIFIED", "DELETED"):
            return None
    elif decode is None or d.type not in ("ADDED", "MODIFIED"):
        return None
    if d.object is None:
        return None
    try:
        obj = decode(d.object)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return _made(n, line, d, resource, obj)


def _made(n: int, line: bytes, d: Any, resource: str, obj: Any) -> Deferred | None:
    """The ``Deferred`` of line ``n`` (decoded: ``d``, its object typed: ``obj``), or None."""
    meta = obj.metadata
    if meta is None or not meta.name:
        return None
    renew = None
    replaces = False
    if resource == "leases":
        if (meta.namespace or "") not in NODE_LEASE_NAMESPACES:
            return None
        renew = _micro_time(obj.spec.renewTime) if obj.spec is not None else None  # as the record has it
    elif resource == "nodes":
        replaces = _replaces(obj.spec.taints if obj.spec is not None else None)
    if resource == "leases":
        return Deferred(n, d.t, resource, d.type, d.list is True, d.cluster, meta.name, renew, False, None, obj)
    if resource == "pods":
        spec = obj.spec
        return Deferred(n, d.t, resource, d.type, d.list is True, d.cluster, meta.name, None, False, line,
                        namespace=meta.namespace or "default",  # (as ``_pod_record`` keys it)
                        seconds=_seconds_of(spec.tolerations if spec is not None else None))
    return Deferred(n, d.t, resource, d.type, d.list is True, d.cluster, meta.name, renew, replaces, line)


_SECONDS: dict[tuple, Seconds] = {}
"""A pod's raw tolerations -> its ``Seconds``: the pods of a fleet share a few lists of tolerations
(the admission plugin's two, a DaemonSet's), and a one-shot answer reads tens of thousands of Pod
lines whose tolerations it only counts (building each one's record was a fifth of such an answer)."""


def _seconds_of(raw: Any) -> Seconds:
    """``pod_tolerations.seconds_of`` of a typed Pod's tolerations, remembered."""
    if not raw:
        return ()
    key = tuple((t.key, t.operator, t.value, t.effect, t.tolerationSeconds) for t in raw)
    got = _SECONDS.get(key)
    if got is None:
        if len(_SECONDS) > 4096:
            _SECONDS.clear()
        got = _SECONDS[key] = seconds_of(pod_tolerations(raw))
    return got


def clean_node_update(obj: Any) -> bool:
    """Whether a Node's JSON, the object of a plain ``MODIFIED`` line, is one ``deferred`` makes a
    ``Deferred`` of that replaces the node's record whole (``columnar_reports`` leaves out the reports
    before such an update, as ``Superseded`` does)."""
    try:
        node = _decode_node(obj)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    meta = node.metadata
    return meta is not None and bool(meta.name) and _replaces(node.spec.taints if node.spec is not None else None)


def _replaces(taints: Any) -> bool:
    """Whether a Node update with these taints (typed, or its record's) replaces its record whole:
    no NoExecute eviction taint (``keep_eviction_start`` then carries nothing over from the record
    before)."""
    return not taints or not any(t.key in EVICTION_TAINTS and t.effect == "NoExecute" for t in taints)


def deferred_entry(e: Entry, held: bool = True) -> Deferred | None:
    """The ``Deferred`` of a kubectl log's clean ADDED or MODIFIED Lease of a node or Node (its
    object a typed ``KubectlLease`` or ``KubectlNode``: ``kubectl_format.iter_entries(typed=True)``),
    for ``sort_entries``; None for any other entry (made a record, or left a dict, as before). Its
    record is built only if it is applied: most renewals of a log are superseded by a later one of
    their lease, most Node updates by the node's next. ``held`` False: it waits only for the next
    renewal of its Lease (``deferred_ahead``), not for the sort, so it is not slimmed."""
    obj = e.obj
    kind = type(obj)
    if kind is KubectlNode:
        return _deferred_node(e, obj)
    if kind is not KubectlLease or e.etype not in ("ADDED", "MODIFIED"):
        return None
    meta = obj.metadata
    if meta is None or not meta.name or (meta.namespace or "") not in NODE_LEASE_NAMESPACES:
        return None
    renew = renew_time(obj.spec) if obj.spec is not None else None  # as the record has it
    if held:
        slim(obj)  # it waits for the sort with 300,000 others (its name interned)
    t = e.t if e.t is not None else 0.0
    return Deferred(e.line, t, "leases", e.etype, e.listing, e.cluster, meta.name, renew, False, None, obj)


def deferred_ahead(e: Entry) -> Deferred | None:
    """``deferred_entry`` of an answer to the end, its entries given to ``Superseded`` as they are
    read (``kubectl_format.sort_entries``' ``ahead``): a renewal is held only until the next one of
    its Lease leaves it out, so it is not slimmed (that was a fifth of the CPU of deferring one)."""
    return deferred_entry(e, False)


def _deferred_node(e: Entry, obj: KubectlNode) -> Deferred | None:
    """``deferred_entry`` of a typed Node: its record, left out once a later update replaces it."""
    if e.etype not in ("ADDED", "MODIFIED"):
        return None
    record = obj.record
    t = e.t if e.t is not None else 0.0
    return Deferred(e.line, t, "nodes", e.etype, e.listing, e.cluster, record.name, None, _replaces(record.taints),
                    None, None, record)


class Superseded:
    """The events of a one-shot answer in the order they are applied (``add``), with those a later
    event supersedes replaced by None in ``events``.

    ``several``: a recording of several clusters (an object is known by its cluster and name); in a
    one-cluster recording a line's ``cluster`` is ignored, as the replay ignores it. ``pods``: False
    when the answer reads no Pods: clean Pod lines are then left out too, only what they show of the
    default toleration is kept (``tallies``, as the state's ``Ingest`` keeps it). ``follows(cluster)``:
    whether the API server moves a manager's write time on every renewal (``ingest.writes_follow_renewals``
    of the server version the cluster's state has when the event is applied; None: not known, no
    listed renewal is then left out); the caller calls ``settings_changed`` when a settings line
    is added. ``received_known`` False: the events are applied without a receive time (a kubectl
    log, ``received_at=None``), so none is a renewal "known" by its receipt.

    ``records``: an ``Entry`` whose object is a ``LeaseRecord`` already (a kubectl log's Leases,
    made records for its sort: ``kubectl_format.sort_entries``) is a clean renewal too, left out
    like a ``Deferred`` one: its renewTime and write time are the record's, and applying it records
    no problem (False: such an entry is followed, never left out: a full replay)."""

    def __init__(self, several: bool, pods: bool = True,
                 follows: Callable[[str | None], bool | None] | None = None, received_known: bool = True,
                 records: bool = False) -> None:
        self.events: list[Any] = []
        self._several = several
        self._pods = pods
        self._leases: dict[Any, _LeaseSeen] = {}
        self._nodes: dict[Any, list[int]] = {}
        self.tallies: dict[str | None, Tally] = {}
        """Without ``pods``: what each cluster's pods show of the default toleration (the state
        would learn it from the Pods it is not given: ``learned``)."""
        self._pod_seconds: dict[str | None, dict[tuple[str, str], Seconds]] = {}
        """Per cluster: what each Pod counted (to take back when it is deleted or changes)."""
        self.skipped = 0
        self._synced: set[str | None] = set()
        self._listed: dict[str | None, set[Any]] = {}
        """Per cluster: the Leases its list in progress gave (left out or not): at its SYNCED the
        state deletes the others it holds (``Store.relisted``), and so does this."""
        self._follows_of = follows or (lambda cluster: None)
        self._follows: dict[str | None, bool | None] = {}
        self._received_known = received_known
        self._records = records
        self.earliest = float("inf")
        """The earliest time of the events given to it before a sort (``kubectl_format.sort_entries``'
        ``ahead``): the first event read, which it may have left out."""

    def settings_changed(self) -> None:
        """A settings line was added: the server version may have changed from here on."""
        self._follows.clear()

    def add(self, e: Any) -> None:
        """The next event in application order (an ``Entry``, a ``Deferred``, or anything else
        the caller applies in order)."""
        out = self.events
        if type(e) is Deferred:
            key = (e.cluster, e.name) if self._several else e.name
            if e.resource == "leases":
                k = self._leases.get(key)
                if k is None:
                    k = self._leases[key] = _LeaseSeen()
                if e.listing:
                    self._listed.setdefault(e.cluster if self._several else None, set()).add(key)
                if self._renewal(k, e.renew, e.t, e.listing, e.cluster, e.lease):
                    for i in k.pending:  # this renewal sets all the track alone
                        out[i] = _left_out(out[i])
                    k.pending.clear()
                pending = k.pending
            elif e.resource == "nodes":
                pending = self._nodes.get(key)
                if pending is None:
                    pending = self._nodes[key] = []
                elif e.replaces:
                    for i in pending:  # this update replaces the record whole
                        out[i] = _left_out(out[i])
                    pending.clear()
            else:  # a Pod
                if not self._pods:
                    self._tally(e.cluster, (e.namespace, e.name), e.etype, e.seconds)
                    self.skipped += 1
                    return
                pending = []
            pending.append(len(out))
        elif type(e) is Entry and e.resource == "pods" and not self._pods:
            self._tally_entry(e)
        elif type(e) is Entry and e.resource == "leases":
            k = self._lease_entry(e)
            if k is not None:  # a clean renewal's record
                if self._renewal(k, e.obj.renew_time, e.t, e.listing, e.cluster, e.obj):
                    for i in k.pending:
                        out[i] = _left_out(out[i])
                    k.pending.clear()
                k.pending.append(len(out))
        out.append(e)

    def _renewal(self, k: _LeaseSeen, renew: float | None, t: float | None, listing: bool, cluster: str | None,
                 lease: Any) -> bool:
        """Follow ``k`` through a clean lease event (renewTime ``renew``, line time ``t``, its typed
        ``_Lease`` or its ``LeaseRecord``) as ``Ingest._on_lease`` moves the track; True when the
        track it leaves is the one the event alone leaves (on a new track)."""
        if not k.exact:
            return False
        if not k.exists:  # a new track: LeaseTrack(renewTime, None, None, ...), no renewals
            k.exists, k.renew, k.observed, k.seen, k.skew = True, renew, None, False, None
            advanced = True
        else:
            advanced = renew is not None and (k.renew is None or renew > k.renew)
        if not advanced:
            if renew is None:
                k.renew = k.observed = None  # (and a renewal seen before is gone with it)
                k.seen = False
            return False
        if renew is None:  # a new track without a renewTime: nothing moves
            return False
        cluster = cluster if self._several else None
        received = t if self._received_known else None
        if received is not None and not listing and cluster in self._synced:  # "known"
            k.renew, k.observed, k.seen, k.skew = renew, received, True, received - renew
            return True
        follows = self._follows.get(cluster, _UNSET)
        if follows is _UNSET:
            follows = self._follows[cluster] = self._follows_of(cluster)
        if follows is None:
            k.exact = False  # its timing is not known here: nothing on this lease is dropped any more
            return False
        seen_before = k.observed if k.seen else None
        if follows or seen_before is not None:
            written = lease.written_at if type(lease) is LeaseRecord else \
                lease_write_time(lease) if lease is not None else None
            observed, age_from, skew = listed_renewal(renew, written, received, seen_before, follows)
            alone = (observed, age_from, skew) == listed_renewal(renew, written, received, None, follows)
        else:  # neither "server" nor a renewal seen before: the write time moves no field read here
            observed, age_from, skew, alone = None, "renewTime", None, True
        alone = alone and (skew is not None or k.skew is None)
        k.renew, k.observed, k.seen = renew, observed, age_from in ("receipt", "server")
        if skew is not None:
            k.skew = skew
        return alone

    def _tally(self, cluster: str | None, key: tuple[str, str], etype: str, seconds: Seconds) -> None:
        """A Pod event the answer does not apply, counted as ``Ingest._on_pod`` counts it."""
        c = cluster if self._several else None
        tally = self.tallies.get(c)
        if tally is None:
            tally = self.tallies[c] = Tally()
            self._pod_seconds[c] = {}
        known = self._pod_seconds[c]
        if etype == "DELETED":
            tally.change(known.pop(key, ()), ())
        elif etype in ("ADDED", "MODIFIED"):
            tally.change(known.get(key, ()), seconds)
            if seconds:
                known[key] = seconds
            else:  # (nothing counted: nothing to take back; a DaemonSet's pods are not kept)
                known.pop(key, None)

    def _tally_entry(self, e: Entry) -> None:
        """A Pod event read the ordinary way (applied: the state counts it too)."""
        try:
            pod = pod_from_dict(e.obj)
        except (BadObject, AttributeError, TypeError, ValueError):
            return  # not applied either (``Ingest.apply`` records the problem)
        self._tally(e.cluster, pod.key, e.etype, seconds_of(pod.tolerations))

    @property
    def dropped(self) -> int:
        """Events left out: superseded, or Pods not read."""
        events = self.events
        return events.count(None) + sum(1 for e in events if type(e) is Listed) + self.skipped

    def _lease_entry(self, e: Entry) -> _LeaseSeen | None:
        """Follow a lease's ``Entry``; its lease's ``_LeaseSeen`` when it is a clean renewal (an
        ADDED or MODIFIED ``LeaseRecord``) for ``_renewal`` to follow, else None."""
        cluster = e.cluster if self._several else None
        if e.etype == "SYNCED":
            self._synced.add(cluster)
            listed = self._listed.pop(cluster, None)
            if listed:
                for key, k in self._leases.items():
                    if key not in listed and (not self._several or key[0] == cluster):
                        k.exists, k.exact = False, True  # as DELETED: the list did not give it
            return None
        obj = e.obj
        if type(obj) is LeaseRecord:
            name, namespace = obj.name, obj.namespace
        elif isinstance(obj, dict):  # read by the forgiving dict reader: whatever it is, stop here
            meta = obj.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            namespace = ""
        else:
            return None
        if not isinstance(name, str) or namespace not in NODE_LEASE_NAMESPACES:
            return None  # no lease the state tracks
        key = (cluster, name) if self._several else name
        k = self._leases.get(key)
        if k is None:
            k = self._leases[key] = _LeaseSeen()
        if e.listing and e.etype != "DELETED":
            self._listed.setdefault(cluster, set()).add(key)
        if type(obj) is LeaseRecord:
            if e.etype in ("ADDED", "MODIFIED") and self._records:
                return k
            if e.etype == "DELETED":
                k.exists, k.exact = False, True  # the track is gone: any renewal after starts it afresh
                return None
        k.exact = False  # renewTime unknown here: no renewal after may drop what came before
        return None


class Listed(msgspec.Struct, frozen=True, gc=False):
    """A Node or Lease a list gave, its event left out (a later one supersedes it): applied as
    ``FleetState.listed``, so that the list's SYNCED deletes the same objects as when every event
    is applied (``Store.relisted``)."""

    cluster: str | None
    resource: str
    name: str
    etype: str = "LISTED"


def _left_out(e: Any) -> Listed | None:
    """What stands for an event left out: nothing, or that its list gave its object."""
    if not e.listing:
        return None
    name = e.name if type(e) is Deferred else e.obj.name
    return Listed(e.cluster, e.resource, name)


_UNSET: Any = object()


@dataclass(slots=True)
class _LeaseSeen:
    """A lease's track as the state will hold it once the lines added so far are applied: the
    fields that decide what the next renewal sets."""

    exists: bool = False
    exact: bool = True
    """False: a line this module cannot follow came (read by the dict reader, renewTime unknown)."""
    renew: float | None = None
    observed: float | None = None
    seen: bool = False
    """A renewal was timed by its receipt or by the server (``listed_renewal``'s ``seen_before``)."""
    skew: float | None = None
    pending: list[int] = field(default_factory=list)
    """Positions in ``events`` of its lines since the last renewal that superseded them."""
