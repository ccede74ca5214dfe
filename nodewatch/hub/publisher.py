"""What the hub has told its viewers, and what changed since: snapshots and deltas of the fleet.

The hub evaluates the fleet once per tick (``FleetState.evaluate`` at the hub's ``now``: a frozen,
published snapshot, docs/snapshots.md) and turns the result into one frame that every up-to-date viewer gets, encoded once: the views that changed
since the previous tick, the nodes gone, the labels that changed, and the small ``meta`` (counts,
zones, health, settings). A viewer that just arrived, or fell behind, gets a snapshot instead,
built from the same bookkeeping, so snapshot + deltas always equal what the hub evaluated.

Nodes are named by their key (``NodeView.key``): the name, or ``cluster/name`` when the hub watches
several clusters (the ``meta`` then carries the cluster strip, one ``ClusterView`` per cluster).

Viewers receive evaluated views, not watch events: they never run the rules, so no viewer can
disagree with the hub about a node (and none needs the memory of a FleetState).

Labels travel as one number per node: an index into a table of label *sets*, each a list of
indexes into a table of ``[key, value]`` pairs; both tables grow as new entries appear. A label
whose value is the node's own name (the hostname label, on every node) is the pair ``[key, null]``,
so the nodes of one pool share one set, and a 130,000-node snapshot carries each distinct pair and
set once (a viewer keeps one object per set, not a label tuple per node).

A snapshot is sent worst first and in parts: a ``snap`` frame with the meta and the first
``FIRST_PART`` nodes (more than a screenful: the viewer draws its first frame from it), then
``part`` frames of ``PART`` nodes, each with the labels of its nodes and the pairs not sent yet
(the last one carries whatever pairs are left, so a viewer ends up with the whole table). A viewer
decodes and builds one part at a time, never the whole fleet's JSON at once. The ``snap`` frame
is built first and alone (``Snapshot.first``: a millisecond), so a viewer that attaches gets its
first rows while the hub still encodes the rest (``Snapshot.rest``: 26 parts at 130,000 nodes,
encoded once per tick for every viewer that asks, from what the tick captured).

Most of a delta is lease renewals (13,000 a second at 130,000 nodes): a Ready node that renewed
on time has a view whose only changed fields are the lease's (``RENEW_FIELDS``; the evaluator's
hot path replaces exactly those, ``Evaluator.renewed``). Those travel as ``renew`` entries, the
node's key and the four values, instead of the whole view in ``up``: a quarter of the bytes, and a
viewer moves four fields of the view it has instead of decoding a new one.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Iterable, Mapping
from itertools import compress
from operator import is_not
from typing import Any

from ..core.objects import NodeRecord
from ..core.views import FleetView, NodeView
from . import protocol
from .codec import RENEW_FIELDS, VIEW_FIELDS, to_wire, view_to_wire

_stable = operator.attrgetter(*(f for f in VIEW_FIELDS if f not in RENEW_FIELDS))
"""The fields a renewal leaves as they were."""
_renewal = operator.attrgetter(*RENEW_FIELDS)
FIRST_PART = 300
"""Nodes in the ``snap`` frame itself: the worst first, more than any screen shows."""
PART = 1000
"""Nodes in each following ``part`` frame."""


class Publisher:
    """The hub's bookkeeping of what viewers were sent. Used from one thread (the hub's ticker)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seq = 0
        """Number of the last frame built; deltas are numbered so a viewer can tell a gap."""
        self._last: dict[str, NodeView] = {}
        """The view each node had in the last update. Views are frozen and an unchanged node keeps
        its view object from one snapshot to the next: the same object was sent already, and its
        fields need no comparing (most of a 65,000-node fleet, each tick)."""
        self._records: dict[str, NodeRecord] = {}
        self._sent_records: dict[str, NodeRecord] = {}
        """The records dict of the last update, as given (a new dict each time, of never-mutated
        records): where this one holds the same object at the same place, nothing changed."""
        self._labels: dict[str, int] = {}
        """Each node's label set (an index into ``_set_list``)."""
        self._pairs: dict[tuple[str, str | None], int] = {}
        self._pair_list: list[list[str | None]] = []
        self._sets: dict[tuple[int, ...], int] = {}
        self._set_list: list[list[int]] = []
        self._meta: dict[str, Any] = {}
        self._order: tuple[NodeView, ...] = ()
        """The last snapshot's nodes, worst first (the snapshot's order): its own frozen tuple."""
        self._now = 0.0
        self._snapshot: Snapshot | None = None

    def update(self, view: FleetView, records: dict[str, NodeRecord], now: float, *,
               problems: int, name: str, recent: list | None = None) -> bytes:
        """Take in the fleet as evaluated at ``now``; returns the delta frame since the last update.
        ``records``: the Node records by node key (``NodeView.key``: ``cluster/name`` when the hub
        watches several clusters), for their labels."""
        self.seq += 1
        self.name = name
        up: list[list] = []
        renew: list[list] = []
        last = self._last
        for v in _moved(view.nodes, self._order):
            n = v.key
            old = last.get(n)
            if old is v:
                continue
            last[n] = v
            if old is not None and _stable(v) == _stable(old):
                moved = _renewal(v)
                if moved == _renewal(old):
                    continue  # a new object, the same view
                observed, duration, skew, nxt = moved
                nxt = None if nxt == math.inf else nxt
                renew.append([n, observed, duration, skew, nxt])
            else:
                up.append(view_to_wire(v))
        gone: list[str] = []
        if len(last) > len(view.nodes):  # (every node of the view is in ``last`` now: the rest went)
            seen = {v.key for v in view.nodes}
            gone = [n for n in last if n not in seen]
        for n in gone:
            del last[n]
            self._records.pop(n, None)
            self._labels.pop(n, None)
        labels: dict[str, int] = {}
        first_pair, first_set = len(self._pair_list), len(self._set_list)
        changed: Iterable[tuple[str, NodeRecord]] = records.items()
        if len(records) == len(self._sent_records):
            changed = compress(changed, map(is_not, records.values(), self._sent_records.values()))
        self._sent_records = records
        for n, rec in changed:
            if self._records.get(n) is rec:
                continue
            self._records[n] = rec
            sid = self._label_set(n, rec.labels)
            if self._labels.get(n) != sid:
                self._labels[n] = sid
                labels[n] = sid
        self._meta = _meta(view, problems, recent)
        self._order = view.nodes
        self._now = now
        self._snapshot = None
        msg: dict[str, Any] = {"k": "delta", "seq": self.seq, "now": now, "name": name, "meta": self._meta,
                               "up": up, "renew": renew, "del": gone}
        if labels:
            msg["labels"] = labels
            msg["pairs_from"] = first_pair
            msg["pairs"] = self._pair_list[first_pair:]
            msg["sets_from"] = first_set
            msg["sets"] = self._set_list[first_set:]
        return protocol.encode(msg)

    def snapshot(self) -> Snapshot:
        """The whole fleet as of the last update (see the module docstring): its ``snap`` frame
        encoded now, the rest when first asked for; one per tick, shared by every viewer."""
        if self._snapshot is None:
            self._snapshot = Snapshot(self.seq, self._now, self.name, self._meta, self._order,
                                      self._labels, self._pair_list, self._set_list)
        return self._snapshot

    def _label_set(self, key: str, labels: Mapping[str, str]) -> int:
        """The index of the node's label set, entered in the tables if new (see the module docstring)."""
        name = key.rpartition("/")[2]  # (node names have no slash: ``views.node_key``)
        pairs, pair_list = self._pairs, self._pair_list
        idx = []
        for k, v in labels.items():
            kv = (k, None if v == name else v)
            i = pairs.get(kv)
            if i is None:
                i = pairs[kv] = len(pair_list)
                pair_list.append(list(kv))
            idx.append(i)
        t = tuple(idx)
        sid = self._sets.get(t)
        if sid is None:
            sid = self._sets[t] = len(self._set_list)
            self._set_list.append(idx)
        return sid


def _moved(nodes: tuple[NodeView, ...], before: tuple[NodeView, ...]) -> Iterable[NodeView]:
    """The views that may have changed since the snapshot ``before`` (the last update's): a view
    at the same place as the very same object was sent already. A renewal replaces a view at its
    place (``Evaluator.renewed``), so a tick of 13,000 renewals at 130,000 nodes looks at 13,000
    views, not 130,000 (compared in C); when nodes came or went, every view is looked at."""
    if len(nodes) != len(before):
        return nodes
    return compress(nodes, map(is_not, nodes, before))


def _meta(view: FleetView, problems: int, recent: list | None = None) -> dict[str, Any]:
    """Everything of a FleetView but its nodes: small, sent in full every tick."""
    return {
        "settings": to_wire(view.settings),
        "zones": to_wire(view.zones),
        "counts": {s.name: n for s, n in view.counts.items()},
        "all_zones_full": view.all_zones_full,
        "leases_blind": view.leases_blind,
        "blind_reason": view.blind_reason,
        "health": to_wire(view.health),
        "generation": view.generation,
        "statefulset_at_risk": view.statefulset_at_risk,
        "controller_suspect": view.controller_suspect,
        "awaiting_renewals": view.awaiting_renewals,
        "cordoned": view.cordoned,
        "problems": problems,
        "recent_problems": to_wire(recent or []),
        "clusters": to_wire(view.clusters),
    }


class Snapshot:
    """One tick's snapshot: ``first`` (the ``snap`` frame) built at once, ``rest()`` (the ``part``
    frames) built on first call, by whichever thread asks first, from the tick's own frozen views
    and a copy of its label indexes (no wire form is cached per node: 130,000 lists of twenty
    fields would be ~30 MB of the hub, to save the encoding of a snapshot once a tick at most)."""

    def __init__(self, seq: int, now: float, name: str, meta: dict[str, Any], order: tuple[NodeView, ...],
                 labels: dict[str, int], pair_list: list[list[str | None]],
                 set_list: list[list[int]]) -> None:
        self.seq = seq
        self._order = order  # (this tick's frozen views, worst first)
        self._parts = 1 + -(-max(0, len(order) - FIRST_PART) // PART)
        self._labels = dict(labels)
        self._pairs = pair_list[:]  # (the tables only grow; their first entries never change)
        self._sets = set_list[:]
        self._now = now
        self._lock = threading.Lock()
        self._rest: bytes | None = None
        self._sent: set[int] = set()
        self._sets_sent: set[int] = set()
        body = self._body(0, order[:FIRST_PART])
        self.first = protocol.encode({"k": "snap", "name": name, "meta": meta, "parts": self._parts - 1, **body})

    def rest(self) -> bytes:
        """The ``part`` frames after ``first``, concatenated (empty for a fleet that fits in one)."""
        with self._lock:
            if self._rest is None:
                o = self._order
                self._rest = b"".join(protocol.encode({"k": "part", "i": i, **self._body(i, o[at:at + PART])})
                                      for i, at in enumerate(range(FIRST_PART, len(o), PART), 1))
                self._order = ()
            return self._rest

    def __bytes__(self) -> bytes:
        return self.first + self.rest()

    def _body(self, i: int, views: tuple[NodeView, ...]) -> dict[str, Any]:
        names = [v.key for v in views]
        labels = self._labels
        last = i == self._parts - 1
        if last:  # (with any record the view does not list yet)
            listed = {v.key for v in self._order}
            names += [n for n in labels if n not in listed]
        part_labels = {n: labels[n] for n in names if n in labels}
        sets = (set(range(len(self._sets))) if last else set(part_labels.values())) - self._sets_sent
        self._sets_sent |= sets
        pairs = (set(range(len(self._pairs))) if last else {j for i in sets for j in self._sets[i]}) - self._sent
        self._sent |= pairs
        set_idx, pair_idx = sorted(sets), sorted(pairs)
        return {"seq": self.seq, "now": self._now, "nodes": [view_to_wire(v) for v in views], "labels": part_labels, "pair_idx": pair_idx,
                "pairs": [self._pairs[j] for j in pair_idx], "set_idx": set_idx, "sets": [self._sets[i] for i in set_idx]}
