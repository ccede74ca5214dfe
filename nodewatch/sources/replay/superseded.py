"""Lease renewals a one-shot answer may leave out: those a later renewal of the same lease supersedes.

Why: nine lines in ten of a recording are Lease renewals, each node's every 10 s. ``status --replay
--at T`` needs the state at T, not the way there: of the 30 renewals a node made in five minutes,
the last one decides everything the answer shows. Decoding and applying the other 29 was most of
the command's time.

When a renewal may be left out, exactly: a renewal ``L`` received on the watch (not listed) once
the lease list was in, whose renewTime is later than every renewTime of its lease seen before it,
sets every field of the lease's track that a view reads (when it was observed, on which clock, its
skew, renewTime, duration, holder) from ``L`` alone (``Ingest._on_lease``: "advanced", "known").
Whatever came before ``L`` on that lease can then change nothing an answer shows, and is dropped.
What is not kept exact: the number of renewals seen and the heartbeat history (the dashboard's
drill-down alone shows them; a one-shot answer has neither).

Only clean lines are ever dropped: an ordinary event line whose Lease the typed decoder reads with
a name (so applying it would record no problem), in the node-lease namespace. Anything else on a
lease (a DELETED, a Lease read through the dict fallback) is applied where it comes; one that could
move renewTime without this module knowing by how much stops any later drop on that lease.
Everything else that applying a renewal touches is kept: the time of the last event received and
the lease stream's last activity come from the last renewal of each lease, which is never dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...core.objects import LeaseRecord
from ...core.timeutil import parse_time
from ...core.wire import _Lease  # the typed decoder's own Lease: what it accepts, this accepts
from ..recording import Entry

NODE_LEASE_NAMESPACES = ("", "kube-node-lease")
"""Namespaces whose Leases are node heartbeats (``Ingest._on_lease`` ignores the others)."""

_decode_lease = msgspec.json.Decoder(_Lease).decode


@dataclass(slots=True)
class LeaseLine:
    """A clean Lease renewal line, its object not decoded into a record yet (``parse`` does, if
    the line is applied)."""

    line: int
    t: float
    etype: str
    listing: bool
    cluster: str | None
    name: str
    renew: float | None
    """renewTime, as the record will have it."""
    data: bytes
    """The line itself."""

    resource = "leases"


def lease_line(n: int, line: bytes, d: Any) -> LeaseLine | None:
    """The ``LeaseLine`` of a line whose ``lines.plain_event`` is ``d`` (not None); None when the
    line is not a clean ADDED or MODIFIED node Lease (it is then parsed and applied in full)."""
    if d.resource != "leases" or d.type not in ("ADDED", "MODIFIED"):
        return None
    try:
        lease = _decode_lease(d.object)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    meta = lease.metadata
    if meta is None or not meta.name or (meta.namespace or "") not in NODE_LEASE_NAMESPACES:
        return None
    spec = lease.spec
    renew = parse_time(spec.renewTime) if spec is not None else None
    return LeaseLine(n, d.t, d.type, d.list is True, d.cluster, meta.name, renew, line)


class Superseded:
    """The events of a one-shot answer in the order they are applied (``add``), with the lease
    renewals a later one supersedes replaced by None in ``events``.

    ``several``: a recording of several clusters (a lease is known by its cluster and name); in a
    one-cluster recording a line's ``cluster`` is ignored, as the replay ignores it."""

    def __init__(self, several: bool) -> None:
        self.events: list[Any] = []
        self.dropped = 0
        self._several = several
        self._leases: dict[tuple[str | None, str], _LeaseSeen] = {}
        self._synced: set[str | None] = set()

    def add(self, e: Any) -> None:
        """The next event in application order (an ``Entry``, a ``LeaseLine``, or anything else
        the caller applies in order)."""
        out = self.events
        if type(e) is LeaseLine:
            cluster = e.cluster if self._several else None
            key = (cluster, e.name)
            k = self._leases.get(key)
            if k is None:
                k = self._leases[key] = _LeaseSeen()
            renew = e.renew
            if renew is not None and renew > k.newest:
                if not e.listing and cluster in self._synced:
                    for i in k.pending:  # this renewal sets all the track alone
                        out[i] = None
                    self.dropped += len(k.pending)
                    k.pending.clear()
                k.newest = renew
            k.pending.append(len(out))
        elif type(e) is Entry and e.resource == "leases":
            self._lease_entry(e)
        out.append(e)

    def _lease_entry(self, e: Entry) -> None:
        cluster = e.cluster if self._several else None
        if e.etype == "SYNCED":
            self._synced.add(cluster)
            return
        obj = e.obj
        if type(obj) is LeaseRecord:
            name, namespace = obj.name, obj.namespace
        elif isinstance(obj, dict):  # read by the forgiving dict reader: whatever it is, stop here
            meta = obj.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            namespace = ""
        else:
            return
        if not isinstance(name, str) or namespace not in NODE_LEASE_NAMESPACES:
            return  # no lease the state tracks
        k = self._leases.get((cluster, name))
        if k is None:
            k = self._leases[(cluster, name)] = _LeaseSeen()
        if e.etype == "DELETED" and type(obj) is LeaseRecord:
            k.newest = -math.inf  # the track is gone: any renewal after starts it afresh
        else:
            k.newest = math.inf  # renewTime unknown here: no renewal after may drop what came before


@dataclass(slots=True)
class _LeaseSeen:
    newest: float = -math.inf
    """The latest renewTime seen on this lease (inf: unknown)."""
    pending: list[int] = field(default_factory=list)
    """Positions in ``events`` of its lines since the last renewal that superseded them."""
